"""In-piece streaming on ONNX Runtime: the front once, the decoder window by window, each window normalised with an estimate of the whole piece's statistics (each voice's, kept on disk)."""
