"""Sphinx configuration of the API reference: every page is generated from the docstrings.

    python -m sphinx -b html docs/api build/api
"""

project = "singa_tensor"
extensions = ["sphinx.ext.autodoc", "sphinx.ext.napoleon", "sphinx.ext.viewcode"]
autodoc_default_options = {"members": True, "undoc-members": False, "show-inheritance": True}
autodoc_member_order = "bysource"
autodoc_typehints = "description"
napoleon_google_docstring = True
napoleon_custom_sections = [("Example", "example"), ("Examples", "examples")]
html_theme = "alabaster"
exclude_patterns = ["_build"]
