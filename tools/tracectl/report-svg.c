/* SPDX-License-Identifier: LGPL-2.1-or-later */

/* A self-contained interactive flamegraph: one <g class="f"> per frame
 * (a <title> tooltip, a <rect> as wide as the frame's share, a <text>
 * label), and a small script of our own for zooming into a frame on
 * click, searching by regular expression and showing details on hover.
 * Nothing is fetched from the network. */

#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "basic/hash.h"
#include "profile.h"

#define SVG_WIDTH 1200.0
#define SVG_PAD 10.0
#define FRAME_H 16.0
#define TOP_H 40.0
#define BOTTOM_H 30.0
#define MIN_WIDTH 0.1 /* px; narrower frames are left out, as flamegraph.pl does */

/* Writes s escaped for XML text and attributes; bytes that are not valid
 * UTF-8 or not allowed in XML become '?'. */
static void xml_escape(FILE *f, const char *s) {
        const unsigned char *u = (const unsigned char *) s;
        while (*u) {
                unsigned c = *u;
                size_t n = c < 0x80 ? 1 : (c & 0xe0) == 0xc0 ? 2 : (c & 0xf0) == 0xe0 ? 3 : (c & 0xf8) == 0xf0 ? 4 : 0;
                bool ok = n > 0;
                for (size_t i = 1; ok && i < n; i++)
                        ok = (u[i] & 0xc0) == 0x80;
                if (ok && n == 2 && c < 0xc2)
                        ok = false;
                if (!ok || (n == 1 && c < 0x20 && c != '\t')) {
                        fputc('?', f);
                        u++;
                        continue;
                }
                if (n > 1) {
                        fwrite(u, 1, n, f);
                        u += n;
                        continue;
                }
                switch (c) {
                case '&':
                        fputs("&amp;", f);
                        break;
                case '<':
                        fputs("&lt;", f);
                        break;
                case '>':
                        fputs("&gt;", f);
                        break;
                case '"':
                        fputs("&quot;", f);
                        break;
                case '\'':
                        fputs("&apos;", f);
                        break;
                default:
                        fputc((int) c, f);
                }
                u++;
        }
}

static void color(const struct profile *p, const struct profile_node *n, char *buf, size_t size) {
        if (n->kind == NODE_ROOT || n->kind == NODE_COMM) {
                snprintf(buf, size, "rgb(200,200,200)");
                return;
        }
        const struct profile_sym *s = &p->syms[n->value];
        uint64_t h = fnv1a64(s->name, strlen(s->name));
        double v1 = (double) (h & 0xff) / 255.0, v2 = (double) ((h >> 8) & 0xff) / 255.0;
        if (!s->symbolized)
                snprintf(buf, size, "rgb(%d,%d,%d)", 180 + (int) (40 * v1), 160 + (int) (40 * v1), 160 + (int) (40 * v2));
        else if (s->kernel)
                snprintf(buf, size, "rgb(%d,%d,%d)", 200 + (int) (55 * v1), 110 + (int) (60 * v2), 40 + (int) (30 * v1));
        else
                snprintf(buf, size, "rgb(%d,%d,%d)", 205 + (int) (50 * v2), (int) (230 * v1), (int) (55 * v2));
}

struct svg {
        FILE *f;
        struct profile *p;
        const struct profile_tree *t;
        double scale;
        uint32_t max_depth;
        double height;
        bool icicle;
        uint64_t all;
};

static uint32_t max_depth(const struct profile_tree *t) {
        uint32_t d = 0;
        for (size_t i = 0; i < t->n_nodes; i++)
                if (t->nodes[i].total[0] && t->nodes[i].depth > d)
                        d = t->nodes[i].depth;
        return d;
}

static int frame(struct svg *s, uint32_t n, double x) {
        const struct profile_node *node = &s->t->nodes[n];
        unsigned m = s->p->metric;
        double w = (double) node->total[m] * s->scale;
        if (node->total[0] == 0 || w < MIN_WIDTH)
                return 0;
        double y = s->icicle ? TOP_H + node->depth * FRAME_H : s->height - BOTTOM_H - (node->depth + 1) * FRAME_H;
        char label[1024], fill[48];
        profile_node_label(s->p, node, label, sizeof(label));
        color(s->p, node, fill, sizeof(fill));
        const struct profile_sym *sym = node->kind == NODE_FRAME ? &s->p->syms[node->value] : NULL;
        FILE *f = s->f;
        fprintf(f, "<g class=\"f\" data-x=\"%.4f\" data-w=\"%.4f\" data-d=\"%u\" data-v=\"%" PRIu64 "\" data-name=\"",
                SVG_PAD + x, w, node->depth, node->total[m]);
        xml_escape(f, label);
        fprintf(f, "\"><title>");
        xml_escape(f, label);
        if (sym && sym->module && sym->symbolized) {
                fprintf(f, " [");
                xml_escape(f, sym->module);
                fprintf(f, "]");
        }
        fprintf(f, " (%.*f %s, %.2f%%)", m ? 3 : 0, profile_value(s->p, node->total[m]), profile_unit(s->p),
                s->all ? 100.0 * (double) node->total[m] / (double) s->all : 0.0);
        if (sym && sym->build_id && sym->symbolized) {
                fprintf(f, " buildid ");
                xml_escape(f, sym->build_id);
        }
        fprintf(f, "</title><rect x=\"%.4f\" y=\"%.1f\" width=\"%.4f\" height=\"%.1f\" fill=\"%s\" rx=\"2\"/>"
                   "<text x=\"%.4f\" y=\"%.1f\"></text></g>\n",
                SVG_PAD + x, y, w, FRAME_H - 1, fill, SVG_PAD + x + 3, y + FRAME_H - 5);

        uint32_t *kids;
        size_t k = profile_children_sorted(s->p, s->t, n, &kids);
        double cx = x;
        int r = 0;
        for (size_t i = 0; i < k && r >= 0; i++) {
                r = frame(s, kids[i], cx);
                cx += (double) s->t->nodes[kids[i]].total[m] * s->scale;
        }
        free(kids);
        return r;
}

/* The script: zoom, search, details. Kept small and free of "]]>". */
static const char script[] =
        "var W=" "1200" ",P=" "10" ",fr=[].slice.call(document.querySelectorAll('g.f'));\n"
        "var det=document.getElementById('details'),mt=document.getElementById('matched');\n"
        "function num(g,a){return parseFloat(g.getAttribute(a));}\n"
        "function fit(g){var r=g.querySelector('rect'),t=g.querySelector('text'),w=num(r,'width');\n"
        " var s=g.getAttribute('data-name'),n=Math.floor((w-6)/7);\n"
        " t.textContent=n<3?'':(s.length<=n?s:s.slice(0,n-2)+'..');t.setAttribute('x',num(r,'x')+3);}\n"
        "function place(g,x,w){var r=g.querySelector('rect');r.setAttribute('x',x);r.setAttribute('width',w);fit(g);}\n"
        "function zoom(z){var x0=num(z,'data-x'),w0=num(z,'data-w'),d0=num(z,'data-d'),k=(W-2*P)/w0;\n"
        " fr.forEach(function(g){var x=num(g,'data-x'),w=num(g,'data-w'),d=num(g,'data-d'),e=1e-6;\n"
        "  if(d>=d0&&x>=x0-e&&x+w<=x0+w0+e){g.style.display='';g.style.opacity='';place(g,P+(x-x0)*k,w*k);}\n"
        "  else if(d<d0&&x<=x0+e&&x+w>=x0+w0-e){g.style.display='';g.style.opacity='0.5';place(g,P,W-2*P);}\n"
        "  else g.style.display='none';});\n"
        " document.getElementById('unzoom').style.display='';}\n"
        "function unzoom(){fr.forEach(function(g){g.style.display='';g.style.opacity='';\n"
        " place(g,num(g,'data-x'),num(g,'data-w'));});document.getElementById('unzoom').style.display='none';}\n"
        "function search(re){var iv=[],tot=num(fr[0],'data-w');\n"
        " fr.forEach(function(g){var r=g.querySelector('rect'),o=g.getAttribute('data-fill');\n"
        "  if(o===null){o=r.getAttribute('fill');g.setAttribute('data-fill',o);}\n"
        "  if(re&&re.test(g.getAttribute('data-name'))){r.setAttribute('fill','rgb(230,0,230)');\n"
        "   iv.push([num(g,'data-x'),num(g,'data-x')+num(g,'data-w')]);}else r.setAttribute('fill',o);});\n"
        " iv.sort(function(a,b){return a[0]-b[0];});var sum=0,end=-1;\n"
        " iv.forEach(function(v){if(v[0]>=end){sum+=v[1]-v[0];end=v[1];}else if(v[1]>end){sum+=v[1]-end;end=v[1];}});\n"
        " mt.textContent=re?'Matched: '+(100*sum/tot).toFixed(2)+'%':'';}\n"
        "document.documentElement.addEventListener('click',function(e){var g=e.target.closest?e.target.closest('g.f'):null;\n"
        " if(e.target.id==='unzoom'){unzoom();return;}\n"
        " if(e.target.id==='search'){var q=prompt('Search (regular expression)','');\n"
        "  if(q===null)return;try{search(q?new RegExp(q):null);}catch(x){mt.textContent='bad expression';}return;}\n"
        " if(g)zoom(g);});\n"
        "document.documentElement.addEventListener('mouseover',function(e){var g=e.target.closest?e.target.closest('g.f'):null;\n"
        " if(g)det.textContent=g.querySelector('title').textContent;});\n"
        "fr.forEach(fit);\n";

int report_svg(FILE *f, struct profile *p, const struct report_options *o) {
        struct profile_tree t;
        int r = profile_merged_tree(p, &t);
        if (r < 0)
                return r;
        unsigned m = p->metric;
        struct svg s = {
                .f = f,
                .p = p,
                .t = &t,
                .icicle = o->icicle,
                .all = t.nodes[0].total[m],
        };
        s.max_depth = max_depth(&t);
        s.height = TOP_H + (s.max_depth + 1) * FRAME_H + BOTTOM_H;
        s.scale = s.all ? (SVG_WIDTH - 2 * SVG_PAD) / (double) s.all : 0;
        const char *title = o->title ? o->title : o->icicle ? "Icicle graph" : "Flame graph";
        fprintf(f, "<?xml version=\"1.0\" encoding=\"UTF-8\" standalone=\"no\"?>\n"
                   "<svg xmlns=\"http://www.w3.org/2000/svg\" version=\"1.1\" width=\"%.0f\" height=\"%.0f\" "
                   "viewBox=\"0 0 %.0f %.0f\" font-family=\"monospace\" font-size=\"12\">\n",
                SVG_WIDTH, s.height, SVG_WIDTH, s.height);
        fprintf(f, "<style>g.f:hover rect{stroke:black;stroke-width:0.5;cursor:pointer} g.f text{pointer-events:none}"
                   " #unzoom,#search{cursor:pointer}</style>\n");
        fprintf(f, "<rect x=\"0\" y=\"0\" width=\"%.0f\" height=\"%.0f\" fill=\"rgb(250,250,240)\"/>\n", SVG_WIDTH, s.height);
        fprintf(f, "<text x=\"%.0f\" y=\"20\" text-anchor=\"middle\" font-size=\"16\">", SVG_WIDTH / 2);
        xml_escape(f, title);
        fprintf(f, " (%.*f %s%s)</text>\n", m ? 3 : 0, profile_value(p, s.all), profile_unit(p),
                p->kind == PROFILE_OFF_CPU      ? " off-CPU"
                : p->kind == PROFILE_HEAP_INUSE ? " in use"
                : p->kind == PROFILE_HEAP_ALLOC ? " allocated"
                                                : "");
        fprintf(f, "<text id=\"unzoom\" x=\"%.0f\" y=\"20\" style=\"display:none\">[reset zoom]</text>\n", SVG_PAD);
        fprintf(f, "<text id=\"search\" x=\"%.0f\" y=\"20\" text-anchor=\"end\">[search]</text>\n", SVG_WIDTH - SVG_PAD);
        fprintf(f, "<text id=\"matched\" x=\"%.0f\" y=\"%.0f\" text-anchor=\"end\"></text>\n", SVG_WIDTH - SVG_PAD,
                s.height - 10);
        fprintf(f, "<text id=\"details\" x=\"%.0f\" y=\"%.0f\"> </text>\n", SVG_PAD, s.height - 10);
        fprintf(f, "<g id=\"frames\">\n");
        if (s.all)
                r = frame(&s, 0, 0);
        fprintf(f, "</g>\n<script type=\"text/ecmascript\"><![CDATA[\n%s]]></script>\n</svg>\n", script);
        profile_tree_done(&t);
        return r;
}
