"""`sparc-local eval`: ReQA sets and metrics through the product's own path."""
