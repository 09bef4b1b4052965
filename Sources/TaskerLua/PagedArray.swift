/// A growable array stored in pages of 4,096 elements: appending never
/// moves what is stored. A plain array doubles, copying its whole content
/// into fresh memory each time (for a value per task, about 1% of a
/// 200,000-task run went to those copies and their page faults).
struct PagedArray<Element> {
    private static var shift: Int { 12 }
    private static var pageSize: Int { 1 << shift }
    private var pages: [[Element]] = []
    private(set) var count = 0

    var isEmpty: Bool { count == 0 }
    var indices: Range<Int> { 0..<count }

    mutating func append(_ e: Element) {
        if count & (Self.pageSize - 1) == 0 {
            var page: [Element] = []
            page.reserveCapacity(Self.pageSize)
            pages.append(page)
        }
        pages[pages.count - 1].append(e)  // in place: the page is unique
        count += 1
    }

    subscript(i: Int) -> Element {
        get {
            precondition(i >= 0 && i < count, "index out of range")
            return pages[i >> Self.shift][i & (Self.pageSize - 1)]
        }
        set {
            precondition(i >= 0 && i < count, "index out of range")
            pages[i >> Self.shift][i & (Self.pageSize - 1)] = newValue
        }
    }
}
