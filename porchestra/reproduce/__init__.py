"""`porchestra reproduce NAME`: one recipe per paper table/figure (docs/reproducing.md)."""
