"""One turn: what it is given (types, inputs), the briefing, the tools it is offered and the engine that runs the model's calls."""
