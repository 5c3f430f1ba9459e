"""Constants of the standard.

Specification: https://data-apis.org/array-api/2025.12/API_specification/constants.html
"""

import math

__all__ = ["e", "inf", "nan", "newaxis", "pi"]

e = math.e
inf = math.inf
nan = math.nan
newaxis = None
pi = math.pi
