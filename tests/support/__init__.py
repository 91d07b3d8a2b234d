"""Helpers shared by test modules (a test module never imports another): live servers, data-set readers, test
doubles of outside services (fakes/) and verifier plugins loaded by name (plugins/)."""
