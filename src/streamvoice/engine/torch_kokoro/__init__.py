"""Kokoro-82M in PyTorch, batched exactly: rows of different lengths padded into one call give what each row
gives alone. The GPU engine (issue #65) runs on this; on a CPU the static-int8 ONNX engine stays the default.

``layers`` holds the masked building blocks, ``albert``, ``front`` and ``decoder`` the model's halves,
``weights`` maps the official ONNX file's weights onto them, and ``model`` runs tokens to audio.
"""
