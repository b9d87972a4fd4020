"""The dashboard: static pages (web/static) over the REST API, and the views made for them."""
