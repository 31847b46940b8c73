"""The training template a snapshot ships: the profile's chat template, with its generation markers limited
to the last assistant turn when the profile's loss is `last-turn`.

TRL's `assistant_only_loss` trains every span a template wraps in `{% generation %}`; it has no last-turn
mode. A correction sample (wrong plan, review request, corrected plan) trained that way learns the wrong
plan too (DOMAIN §5.1). Rewriting each `{% generation %}X{% endgeneration %}` as
`{% if loop.last %}{% generation %}X{% endgeneration %}{% else %}X{% endif %}` renders the same bytes and
marks only the last message of the conversation, which in every training row is the final assistant turn.
"""

from __future__ import annotations

import re

from mashbill.errors import MashbillError

TRAINING_TEMPLATE = "training_template.jinja"
_BLOCK = re.compile(r"\{%-?\s*generation\s*-?%\}(.*?)\{%-?\s*endgeneration\s*-?%\}", re.S)


def last_turn_template(template: str) -> str:
    """`template` with generation markers that cover only the last message (see the module docstring)."""
    if "loop.last" in template and _BLOCK.search(template) and "{% if loop.last %}{% generation %}" in template:
        return template  # already a last-turn template
    if not _BLOCK.search(template):
        raise MashbillError("a last-turn training template needs a chat template with {% generation %} markers "
                            "around the assistant content")
    return _BLOCK.sub(lambda m: "{% if loop.last %}{% generation %}" + m.group(1) + "{% endgeneration %}{% else %}"
                      + m.group(1) + "{% endif %}", template)


def training_template(template: str | None, loss: str) -> str | None:
    """The template a trainer must render with for `loss`; None when there is no template."""
    if template is None:
        return None
    return last_turn_template(template) if loss == "last-turn" else template

