"""Isolated execution of untrusted programs. Imports neither the server nor the verifiers."""
