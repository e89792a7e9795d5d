"""Answering a question: query tokens, scoring, BM25, filters; never onnxruntime."""
