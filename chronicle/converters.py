"""Turn addresses count from 1, as the pages do ("Turn 3" is /turns/3/), while the code and the
database keep the 0-based index: the converter turns one into the other both ways, so views take
`index` and `{% url … turn.index %}` writes the number."""

from django.urls import register_converter


class TurnNumber:
    regex = "[1-9][0-9]*"

    def to_python(self, value: str) -> int:
        return int(value) - 1

    def to_url(self, index: int) -> str:
        return str(int(index) + 1)


register_converter(TurnNumber, "turn")  # once, when the first URL module imports this one
