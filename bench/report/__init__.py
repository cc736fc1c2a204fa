"""The report of a results folder: its tables, sections, plots, report.md and report.html, each section a module."""
