"""What a line leaves behind: each listener's memory of it (formation) and the secrets it told."""
