"""The second stage of `ask`: a cross-encoder that reads the question with each of the first stage's
top passages (issue 44). Loaded only when it runs: `ask --fast`, `status` and the watcher never import it."""
