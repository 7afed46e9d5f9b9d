"""What moves a run along: its Celery tasks, the services that start, pause, branch and recover it, a turn's bookkeeping, who speaks next, the writer's seat, pins and stage edits."""
