"""Tools for developing and testing Wonda, not used by a running site: the fake OpenAI-compatible server the tests and drills talk to."""
