"""Helpers for the remote tests: a throwaway OpenSSH server on 127.0.0.1."""
