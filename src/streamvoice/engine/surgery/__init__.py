"""Graph surgery on the official ONNX export: where Kokoro is cut in two, norms rewritten to take a prior, rows batched, fused kernels, the CUDA rewrite."""
