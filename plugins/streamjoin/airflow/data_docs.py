"""GX Data Docs as the plugin serves them: readable offline.

GX 1.x's pages load Bootstrap 4, Font Awesome, bootstrap-table, jQuery and Vega from CDNs (jsdelivr,
cdnjs, unpkg, bootstrapcdn, code.jquery.com); without the internet, or behind a proxy that blocks them, a
page is an unstyled wall of text and each of those requests waits for its timeout. Served pages get those
``<link>``/``<script>`` tags removed and :data:`STYLESHEET` instead: the few Bootstrap rules GX's markup
relies on (grid, cards, tables, badges, alerts, nav), with GX's own ``data_docs_default_styles.css`` (a
relative link the site carries) still applying; remote images become their ``alt`` text and Font Awesome's
pass/fail icons Unicode marks. What is lost: the index table's sorting and filtering and
Vega charts (the validation pages GX writes for a checkpoint have none).
"""

from __future__ import annotations

import re

_URL = r"[\"'](?:https?:)?//[^\"']*[\"']"
#: a ``<link>`` or ``<script src>`` tag that loads from another site (http, https or protocol-relative)
_REMOTE = re.compile(
    rf"<link\b[^>]*\bhref\s*=\s*{_URL}[^>]*>|<script\b[^>]*\bsrc\s*=\s*{_URL}[^>]*>\s*</script\s*>", re.IGNORECASE
)
#: an image from another site (GX's logo): its ``alt`` text instead
_REMOTE_IMAGE = re.compile(rf"<img\b[^>]*\bsrc\s*=\s*{_URL}[^>]*>", re.IGNORECASE)
_ALT = re.compile(r"\balt\s*=\s*[\"']([^\"']*)[\"']", re.IGNORECASE)
#: a CSS background from another site
_REMOTE_CSS_URL = re.compile(r"url\(\s*[\"']?(?:https?:)?//[^)]*\)", re.IGNORECASE)

STYLESHEET = """
*,::after,::before{box-sizing:border-box}
body{margin:0;font-family:-apple-system,"Segoe UI",Roboto,"Helvetica Neue",Arial,sans-serif;font-size:.9rem;
  line-height:1.5;color:#212529;background:#f8f9fa}
a{color:#007bff;text-decoration:none}a:hover{text-decoration:underline}
h1,h2,h3,h4,h5,h6{margin:0 0 .5rem;font-weight:500;line-height:1.2}h1{font-size:1.8rem}h2{font-size:1.5rem}
h3{font-size:1.3rem}h4{font-size:1.15rem}h5{font-size:1rem}p{margin:0 0 .8rem}
.container,.container-fluid{width:100%;padding:0 15px;margin:0 auto}
.row{display:flex;flex-wrap:wrap;margin:0 -15px}
[class*=col-]{position:relative;width:100%;padding:0 15px}
@media (min-width:768px){.col-md-2{flex:0 0 16.67%;max-width:16.67%}.col-md-3{flex:0 0 25%;max-width:25%}
  .col-md-4{flex:0 0 33.33%;max-width:33.33%}.col-md-6{flex:0 0 50%;max-width:50%}
  .col-md-8{flex:0 0 66.67%;max-width:66.67%}.col-md-9{flex:0 0 75%;max-width:75%}
  .col-md-10{flex:0 0 83.33%;max-width:83.33%}.col-md-12{flex:0 0 100%;max-width:100%}}
@media (min-width:1200px){.col-xl-2{flex:0 0 16.67%;max-width:16.67%}.col-xl-10{flex:0 0 83.33%;max-width:83.33%}}
.col-12{flex:0 0 100%;max-width:100%}
.card{position:relative;display:flex;flex-direction:column;background:#fff;border:1px solid rgba(0,0,0,.125);
  border-radius:.25rem;margin-bottom:1rem}
.card-header{padding:.6rem 1rem;background:rgba(0,0,0,.03);border-bottom:1px solid rgba(0,0,0,.125)}
.card-body{flex:1 1 auto;padding:1rem}.card-footer{padding:.6rem 1rem;border-top:1px solid rgba(0,0,0,.125)}
.table{width:100%;margin-bottom:1rem;border-collapse:collapse}
.table td,.table th{padding:.5rem;vertical-align:top;border-top:1px solid #dee2e6;text-align:left}
.table thead th{border-bottom:2px solid #dee2e6}.table-sm td,.table-sm th{padding:.3rem}
.table-striped tbody tr:nth-of-type(odd){background:rgba(0,0,0,.04)}
.table-responsive{display:block;width:100%;overflow-x:auto}
.badge{display:inline-block;padding:.25em .45em;font-size:75%;font-weight:700;line-height:1;border-radius:.25rem;
  color:#fff;background:#6c757d}
.badge-success,.bg-success{background:#28a745;color:#fff}.badge-danger,.bg-danger{background:#dc3545;color:#fff}
.badge-warning{background:#ffc107;color:#212529}.badge-info{background:#17a2b8}.badge-secondary{background:#6c757d}
.text-success{color:#28a745!important}.text-danger{color:#dc3545!important}.text-warning{color:#d39e00!important}
.text-muted{color:#6c757d!important}.text-center{text-align:center}.text-right{text-align:right}
.alert{padding:.75rem 1.25rem;margin-bottom:1rem;border:1px solid transparent;border-radius:.25rem}
.alert-success{color:#155724;background:#d4edda}.alert-danger{color:#721c24;background:#f8d7da}
.alert-warning{color:#856404;background:#fff3cd}.alert-info{color:#0c5460;background:#d1ecf1}
.nav{display:flex;flex-wrap:wrap;padding:0;margin:0;list-style:none}.nav-link{display:block;padding:.4rem .8rem}
.navbar{display:flex;flex-wrap:wrap;align-items:center;justify-content:space-between;padding:.5rem 1rem;
  background:#fff;border-bottom:1px solid #dee2e6;margin-bottom:1rem}
.navbar-brand{font-size:1.1rem;color:#212529}.breadcrumb{display:flex;list-style:none;padding:0;margin:0}
.breadcrumb-item+.breadcrumb-item::before{content:"/";padding:0 .5rem;color:#6c757d}
.list-group{padding:0;margin:0 0 1rem;list-style:none}.list-group-item{padding:.5rem 1rem;background:#fff;
  border:1px solid rgba(0,0,0,.125)}.sticky{position:sticky;top:0}
.btn{display:inline-block;padding:.3rem .7rem;border:1px solid #6c757d;border-radius:.25rem;background:#fff}
.d-none{display:none!important}.d-flex{display:flex}.mb-2{margin-bottom:.5rem}.mt-2{margin-top:.5rem}
.p-2{padding:.5rem}.w-100{width:100%}.collapse:not(.show){display:block}
code,pre{font-family:SFMono-Regular,Menlo,Consolas,monospace;font-size:85%}
pre{padding:.5rem;background:#f1f3f5;border-radius:.25rem;overflow:auto}
.fas,.far,.fa{font-style:normal}.fa-check-circle::before{content:"\\2714"}.fa-times::before{content:"\\2718"}
.fa-exclamation-triangle::before{content:"\\26A0"}
"""


def offline_html(html: str, stylesheet_href: str) -> str:
    """``html`` without what it loads from other sites, with the stylesheet at ``stylesheet_href`` instead
    (before ``</head>``, else at the start)."""
    cleaned = _REMOTE.sub("", html)
    cleaned = _REMOTE_IMAGE.sub(lambda m: alt.group(1) if (alt := _ALT.search(m.group(0))) else "", cleaned)
    cleaned = _REMOTE_CSS_URL.sub("none", cleaned)
    link = f'<link rel="stylesheet" href="{stylesheet_href}">'
    head_end = re.search(r"</head\s*>", cleaned, re.IGNORECASE)
    if head_end is None:
        return link + cleaned
    return cleaned[: head_end.start()] + link + cleaned[head_end.start() :]
