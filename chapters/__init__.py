"""Chapter examples: a package so a chapter's files can share its ``common.py`` (``chapters.chNN.common``)."""
