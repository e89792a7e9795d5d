"""The SQLite index: storage core, segments and merge policy, the postings codec, the writer lock."""
