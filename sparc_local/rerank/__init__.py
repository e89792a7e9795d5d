"""The second stage of `ask`: a cross-encoder that reorders the first stage's top passages (issue 44)."""
