"""A griffe extension for the API reference (mkdocs.yml loads it): docstring examples
written as doctests (``>>>`` lines and their output) are shown as Python console blocks
instead of being read as Markdown quotes."""
import griffe


def fence_doctests(text):
    """Wrap each run of doctest lines (from a ``>>>`` line to the next blank line) in a
    ```pycon fence; escape other lines that start with ``>`` (prose, not quotes).
    """
    out, inside, fenced = [], False, False
    for line in text.split("\n"):
        stripped = line.strip()
        if stripped.startswith("```"):
            fenced = not fenced
        if not inside and not fenced and stripped.startswith(">>>"):
            out.append("```pycon")
            inside = True
        elif not inside and not fenced and stripped.startswith(">"):
            line = line.replace(">", "\\>", 1)     # prose such as ">= size": not a quote
        elif inside and not stripped:
            out.append("```")
            inside = False
        out.append(line)
    if inside:
        out.append("```")
    return "\n".join(out)


class DoctestFence(griffe.Extension):
    def on_instance(self, *, obj, **kwargs):     # each object, as griffe creates it
        if obj.docstring is not None and ">" in obj.docstring.value:
            obj.docstring.value = fence_doctests(obj.docstring.value)
