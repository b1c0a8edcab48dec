"""The prose: sentences, the decision text, the Markdown/HTML reports, LaTeX and the
printed summary, all written from the tables through report/format.py."""
