"""The test suite, a package so that its helpers (tests/utils) import by one name everywhere."""
