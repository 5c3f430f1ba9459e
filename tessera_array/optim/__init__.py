"""Optimizers: flat multi-tensor ops, their plain references, and tree optimizers.

=============  ============================  ==========================  ==============
family         flat op (in place, kernel)    plain ``xp`` reference      tree optimizer
=============  ============================  ==========================  ==============
SGD            :func:`sgd` (``sgd_step``)    :func:`sgd_reference`       :class:`SGD`
Adam           :func:`adam` (``adam_step``)  :func:`adam_reference`      :class:`Adam`
AdamW          :func:`adamw` (``adamw_step``)  ``adam_reference(decoupled=True)``  :class:`AdamW`
Adafactor      :func:`adafactor`             :func:`adafactor_reference` :class:`Adafactor`
=============  ============================  ==========================  ==============

The flat ops dispatch through the kernel registry (``op``, backend, dtype) to the
backend's launcher; float32 and float64 are registered on the NumPy backend.
"""

from ._base import NonFiniteGradientError, Optimizer, flatten_tree
from .adafactor import (
    Adafactor,
    AdafactorStateWarning,
    adafactor,
    adafactor_decay,
    adafactor_reference,
    adafactor_state_shapes,
    migrate_adafactor_state,
)
from .adam import Adam, adam, adam_reference
from .adamw import AdamW, adamw
from .sgd import SGD, sgd, sgd_reference

__all__ = [
    "SGD",
    "Adafactor",
    "AdafactorStateWarning",
    "Adam",
    "AdamW",
    "NonFiniteGradientError",
    "Optimizer",
    "adafactor",
    "adafactor_decay",
    "adafactor_reference",
    "adafactor_state_shapes",
    "adam",
    "adam_reference",
    "adamw",
    "flatten_tree",
    "migrate_adafactor_state",
    "sgd",
    "sgd_reference",
]
