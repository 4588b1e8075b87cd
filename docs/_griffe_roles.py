"""A griffe extension for the API reference (mkdocs.yml): the docstrings' reStructuredText
becomes the Markdown that mkdocstrings renders. Cross-reference roles
(``:func:`~minmaxlab.game_step```) become code spans (`game_step`), ``:math:`x``` becomes
inline maths ``$x$``, a ``.. math::`` directive a display block ``$$ ... $$``, a literal
block (a paragraph ending in ``::``, then an indented block) a fenced code block, and an
``Example:`` of ``>>>`` lines griffe's ``Examples:`` section."""

from __future__ import annotations

import re

import griffe

_ROLE = re.compile(r":(?:py:)?(?:func|class|meth|attr|mod|data|obj|exc|const):`(~?)([^`]+)`")
_MATH = re.compile(r":math:`([^`]+)`")


def _code(match: re.Match) -> str:
  tilde, target = match.groups()
  return f"`{target.rsplit('.', 1)[-1] if tilde else target}`"


def plain_roles(text: str) -> str:
  """``text`` with every Sphinx cross-reference role a code span and ``:math:`` inline maths."""
  return _MATH.sub(lambda m: f"${m.group(1).strip()}$", _ROLE.sub(_code, text))


def _indent(line: str) -> int:
  return len(line) - len(line.lstrip())


def blocks(text: str) -> str:
  """``.. math::`` directives and ``::`` literal blocks as Markdown (see the module docstring)."""
  lines, out, i = text.split("\n"), [], 0
  while i < len(lines):
    line = lines[i]
    inline = re.match(r"^(\s*)\.\. math::\s+(\S.*)$", line)
    if inline:  # ".. math:: <formula>" on one line
      pad, formula = inline.groups()
      out += [pad + "$$", pad + formula, pad + "$$"]
      i += 1
      continue
    if not line.rstrip().endswith("::"):
      out.append(line)
      i += 1
      continue
    base = _indent(line)
    j = i + 1
    while j < len(lines) and not lines[j].strip():
      j += 1
    k = j
    while k < len(lines) and (not lines[k].strip() or _indent(lines[k]) > base):
      k += 1
    body = lines[j:k]
    while body and not body[-1].strip():
      body.pop()
    if not body:
      out.append(line)
      i += 1
      continue
    cut = min(_indent(b) for b in body if b.strip())
    pad = " " * base
    inner = [pad + b[cut:] if b.strip() else "" for b in body]
    head = line.strip()
    if head == ".. math::":
      out += [pad + "$$", *inner, pad + "$$", ""]
    else:
      lead = line.rstrip()[:-2].rstrip()
      if lead.strip():
        out.append(lead + ("" if lead.endswith(":") else ":"))
      out += ["", pad + "```python", *inner, pad + "```", ""]
    i = k
  return "\n".join(out)


_EXAMPLE = re.compile(r"^(\s*)Example:[ \t]*\n(?=\s*>>>)", re.M)


def to_markdown(text: str) -> str:
  """All of the module docstring's conversions; an ``Example:`` section of ``>>>`` lines is
  read as griffe's ``Examples:`` section (code, not an admonition of nested quotes)."""
  return plain_roles(blocks(_EXAMPLE.sub(r"\1Examples:\n", text)))


class SphinxRolesToCode(griffe.Extension):
  def on_instance(self, *, obj: griffe.Object, **kwargs) -> None:
    if obj.docstring is not None:
      obj.docstring.value = to_markdown(obj.docstring.value)
