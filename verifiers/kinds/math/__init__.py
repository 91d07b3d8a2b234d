"""The ``math`` verifier: final-answer extraction and an equivalence cascade (string, numeric, symbolic).

Modules use absolute imports only, so the package name never shadows the standard library's ``math``.
The verifier itself lives in ``verifiers.kinds.math.verifier`` (the module the registry loads).
"""
