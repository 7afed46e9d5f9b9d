FROM python:3.11-slim
ENV PYTHONUNBUFFERED=1 PIP_NO_CACHE_DIR=1 HF_HUB_OFFLINE=1 STATIC_ROOT=/app/staticfiles
WORKDIR /app
COPY pyproject.toml ./
COPY wonda_site wonda_site
COPY memory memory
COPY chronicle chronicle
COPY core core
# torch first, pinned. For a smaller CPU-only image, build with
# --build-arg PIP_EXTRA_INDEX_URL=<PyTorch's CPU wheel index>.
ARG PIP_EXTRA_INDEX_URL=""
RUN pip install torch==2.13.0 && pip install -e .
COPY . .
RUN DATABASE_URL=postgres://x/x CELERY_BROKER_URL=redis://x SECRET_KEY=build python manage.py collectstatic --noinput
