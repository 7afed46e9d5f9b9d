"""What a run cost and how its memory served it: measures, probes, the score's parts, a long run written for the page benchmarks."""
