"""Optimizers: flat multi-tensor ops, their plain references, and tree optimizers.

=============  ============================  ==========================  ==============
family         flat op (in place, kernel)    plain ``xp`` reference      tree optimizer
=============  ============================  ==========================  ==============
SGD            :func:`sgd` (``sgd_step``)    :func:`sgd_reference`       :class:`SGD`
Adam           :func:`adam` (``adam_step``)  :func:`adam_reference`      :class:`Adam`
AdamW          :func:`adamw` (``adamw_step``)  ``adam_reference(decoupled=True)``  :class:`AdamW`
Adafactor      :func:`adafactor`             :func:`adafactor_reference` :class:`Adafactor`
=============  ============================  ==========================  ==============

Each step's VJP (:func:`sgd_vjp`, :func:`adam_vjp`, :func:`adamw_vjp`,
:func:`adafactor_vjp`, module :mod:`._vjp`) gives the cotangents of the step's
inputs and of ``lr`` from those of its outputs, for hypergradients through a step.

The flat ops dispatch through the kernel registry (``op``, backend, dtype) to the
backend's launcher; float32 and float64 are registered on the NumPy backend.
"""

from ._base import NonFiniteGradientError, Optimizer, flatten_tree
from ._vjp import SGDVJP, AdafactorVJP, AdamVJP, adafactor_vjp, adam_vjp, adamw_vjp, sgd_vjp
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
    "SGDVJP",
    "Adafactor",
    "AdafactorStateWarning",
    "AdafactorVJP",
    "Adam",
    "AdamVJP",
    "AdamW",
    "NonFiniteGradientError",
    "Optimizer",
    "adafactor",
    "adafactor_decay",
    "adafactor_reference",
    "adafactor_state_shapes",
    "adafactor_vjp",
    "adam",
    "adam_reference",
    "adam_vjp",
    "adamw",
    "adamw_vjp",
    "flatten_tree",
    "migrate_adafactor_state",
    "sgd",
    "sgd_reference",
    "sgd_vjp",
]
