"""The commands' options: declared once in a table (:mod:`~nebisect.options.table`), the
CLI's signatures and the API's keywords generated from it
(:mod:`~nebisect.options.generate`), and the parsers both check values with
(:mod:`~nebisect.options.parsers`)."""
