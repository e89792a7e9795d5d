"""Reading files: walking roots, one reader per format, sentences and paragraphs."""
