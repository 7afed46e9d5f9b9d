from celery import shared_task


@shared_task(soft_time_limit=30, time_limit=60)
def health_probe() -> dict:
    """Answered by a live worker: proves it consumes tasks and reports its embedding model."""
    from memory.embedding import model_info

    return model_info()


@shared_task
def add(x: int, y: int) -> int:
    """The smallest round trip through broker, worker and result backend (used by tests)."""
    return x + y
