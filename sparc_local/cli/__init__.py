"""The command line: parsing, printing, progress; the console entry point."""
