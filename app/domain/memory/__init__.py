"""Memory domain: pure logic for raw chunks, breadcrumbs and unified search.

Nothing here touches the database or the network; the repositories and services
that do live next to these modules and call into them.
"""
