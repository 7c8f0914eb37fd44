"""The subset of CEL (Common Expression Language) the CRDs' ``x-kubernetes-validations`` use,
evaluated as the API server evaluates it: tokens, syntax, functions and the compiled program."""

from .program import ABSENT, Program, compile_rule, unescape_field
from .tokens import CelError

__all__ = ["ABSENT", "CelError", "Program", "compile_rule", "unescape_field"]
