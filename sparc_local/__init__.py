"""sparc-local: private question answering over your own files (SPARC, a learned sparse retriever)."""

__version__ = "0.1.0"
