"""The report: its schema, the builders that make one from a job or a trace, its files."""
