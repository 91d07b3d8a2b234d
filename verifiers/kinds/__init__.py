"""Every verifier kind, one module or package each, in one shape: it exports ``VERIFIERS`` (the instances the
registry loads, listed in ``verifiers.engine.registry.BUILTIN_MODULES``) and names its classes ``<Kind>Verifier``.
``http_calls`` is not a kind: it holds what the kinds that call a server over HTTP share.

A kind imports the contract (``verifiers.types``, ``options``, ``context``, ``base``), its own helpers and
``sandbox.api``; never ``verifiers.engine`` (``tests/project/test_dependency_rule.py``).
"""
