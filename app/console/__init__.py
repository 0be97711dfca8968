"""The web console at /console: server-rendered pages over the domain services
(docs/console.md). A web adapter like the controllers: it reads and writes only through
the services' `of(db, runtime)` factories, under the signed-in user's principal."""
