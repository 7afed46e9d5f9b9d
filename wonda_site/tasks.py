from celery import shared_task


@shared_task
def add(x: int, y: int) -> int:
    """The smallest round trip through broker, worker and result backend (used by tests)."""
    return x + y
