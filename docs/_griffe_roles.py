"""A griffe extension for the API reference (mkdocs.yml): the docstrings' Sphinx roles
(``:func:`~minmaxlab.game_step```, ``:class:`Players```) become Markdown code spans
(`game_step`, `Players`), since mkdocstrings renders Markdown, not reStructuredText."""

from __future__ import annotations

import re

import griffe

_ROLE = re.compile(r":(?:py:)?(?:func|class|meth|attr|mod|data|obj|exc|const):`(~?)([^`]+)`")


def _code(match: re.Match) -> str:
  tilde, target = match.groups()
  return f"`{target.rsplit('.', 1)[-1] if tilde else target}`"


def plain_roles(text: str) -> str:
  """``text`` with every Sphinx cross-reference role replaced by a code span."""
  return _ROLE.sub(_code, text)


class SphinxRolesToCode(griffe.Extension):
  def on_instance(self, *, obj: griffe.Object, **kwargs) -> None:
    if obj.docstring is not None:
      obj.docstring.value = plain_roles(obj.docstring.value)
