"""The input sets every run evaluates before exploring: ``example``, the lengths, ``--inputs``.

* ``example`` — the torch factory's own example inputs (a benign start the user chose);
  a package has none, so it is skipped there;
* ``length(N)`` (``static`` for a model without flexible dims) — the generated inputs
  at each ``--lengths`` value;
* ``inputs`` — the user's ``--inputs`` file, instead of the lengths.

Each is a :class:`~nebisect.inputs.families.InputSet` whose member's family is
``example``, ``length`` or ``inputs`` — names no value family uses, so a group's member
list says which input sets came from where. Their shrink key matches the families':
the largest |value| (the length for generated lengths, like the ``lengths`` family).
"""

from __future__ import annotations

from nebisect.arrays import load_npz
from nebisect.inputs.families import InputSet, Member, ModelInputs
from nebisect.inputs.families.base import largest
from nebisect.sources.inputs import check, lengths_for
from nebisect.sources.resolve import Source

#: the member families of the input sets built here (not value families)
BASE_FAMILIES = ("example", "length", "inputs")


def model_inputs(source: Source, lengths: tuple[int, ...]) -> ModelInputs:
    """What the value families know of ``source``."""
    return ModelInputs(list(source.inputs), source.example, lengths, domains=source.domains)


def base_input_sets(source: Source, lengths: tuple[int, ...], inputs_path: str = "", *,
                    example: bool = True) -> list[InputSet]:
    """``example`` (when asked and the source has one), then ``--inputs`` if given, else
    one generated set per length."""
    described = model_inputs(source, lengths)
    floats = described.names("float")
    sets = []
    if example and source.example is not None:
        sets.append(InputSet(Member("example", "example", None,
                                    largest(source.example, floats)), dict(source.example)))
    if inputs_path:
        arrays = load_npz(inputs_path)
        check(source.inputs, arrays)
        return [*sets, InputSet(Member("inputs", "inputs", None, largest(arrays, floats)), arrays)]
    for length in lengths_for(source.inputs, lengths):
        label = f"length({length})" if length else "static"
        sets.append(InputSet(Member("length", label, None, float(length)),
                             described.generated(length)))
    return sets
