"""False-positive audits of verifiers: labelled (confusion matrix against true labels) and probes (generated attacks
that must never be rewarded), reported as JSON and as a self-contained HTML page."""
from verifiers.audit.labelled import labelled_audit, parse_labelled_rows
from verifiers.audit.probes import probe_audit
from verifiers.audit.report import write_report
from verifiers.audit.rows import AuditInputError

__all__ = ["AuditInputError", "labelled_audit", "parse_labelled_rows", "probe_audit", "write_report"]
