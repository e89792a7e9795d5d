"""The encoder: inputs, the ONNX session, model metadata, export and checkpoint weights."""
