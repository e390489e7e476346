"""AST -> IR translation of @cube functions."""
