"""Chapter 20's fake optimizations, outside the chapter's pairs: ``perflab run --chapters-dir chapters/ch20/fakes
--targets ch91`` runs them (README.md, "Fakes")."""
