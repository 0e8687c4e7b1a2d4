"""The market: the catalog Olares boxes sync (pure), publishing a market folder, and the HTTP source."""
